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


# Response shapes, for the OpenAPI schema (the views return plain dicts from selectors).
class TensorInfo(serializers.Serializer):
    name = serializers.CharField()
    dtype = serializers.CharField()
    shape = serializers.ListField(child=serializers.JSONField(), help_text="int, symbolic name or null")


class ModelOut(serializers.Serializer):
    id = serializers.CharField(help_text="sha256 of the file's bytes")
    sha256 = serializers.CharField()
    name = serializers.CharField()
    graph_name = serializers.CharField()
    size = serializers.IntegerField(help_text="bytes")
    opset = serializers.IntegerField()
    ir_version = serializers.IntegerField()
    producer = serializers.CharField()
    node_count = serializers.IntegerField()
    inputs = TensorInfo(many=True)
    outputs = TensorInfo(many=True)
    default_input_shapes = serializers.DictField(allow_null=True)
    source = serializers.CharField(help_text='"upload" or "sample:<name>"')
    created_at = serializers.DateTimeField()


class CompilationOut(serializers.Serializer):
    id = serializers.CharField(help_text="short public id, e.g. k3x9q2ab")
    url = serializers.CharField(help_text="the page: /c/<id>")
    api_url = serializers.CharField()
    events_url = serializers.CharField()
    ws_url = serializers.CharField()
    model = ModelOut()
    target = serializers.CharField()
    pipeline = serializers.CharField(help_text="expanded pipeline text")
    requested_pipeline = serializers.CharField()
    input_shapes = serializers.DictField()
    options = serializers.DictField()
    compiler_version = serializers.CharField()
    status = serializers.ChoiceField(["queued", "running", "succeeded", "failed"])
    error = serializers.DictField(allow_null=True, help_text="the compile.failed payload")
    attempts = serializers.IntegerField()
    worker = serializers.CharField()
    event_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    cached = serializers.BooleanField(required=False, help_text="POST only: served from the cache")


class EventsPage(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.CharField()
    events = serializers.ListField(child=serializers.DictField(), help_text='{"seq","type","ts",...}')
    complete = serializers.BooleanField()
    next_after = serializers.IntegerField()


class ErrorOut(serializers.Serializer):
    error = serializers.CharField(help_text="one line naming what is wrong")
