"""Request validation for the API (the responses are plain dicts from selectors)."""

from rest_framework import serializers


class CompilationRequest(serializers.Serializer):
    model = serializers.RegexField(r"^[0-9a-fA-F]{64}$", help_text="the model's id (its sha256)")
    target = serializers.CharField(default="host", max_length=64)
    pipeline = serializers.CharField(default="O2", max_length=20000, trim_whitespace=True)
    input_shapes = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField(min_value=0)),
        required=False,
        allow_null=True,
        help_text='{"input name": [1, 3, 224, 224]}; binds symbolic dims',
    )
    options = serializers.DictField(
        child=serializers.BooleanField(), required=False, help_text='{"verify": true, "benchmark": true}'
    )
    cache = serializers.BooleanField(default=True, help_text="false: always compile again")


class UploadRequest(serializers.Serializer):
    model = serializers.FileField(help_text="the .onnx file (multipart field `model`)")
