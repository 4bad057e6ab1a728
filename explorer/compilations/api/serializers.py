"""Request validation for the API (the responses are plain dicts from selectors).

The field checks and their messages are `services/validation.py`'s, so that every endpoint and
`create_compilation` accept the same values and say the same words.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from explorer.compilations.services import validation


@extend_schema_field({"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]})
class DimField(serializers.Field):
    """One dim of a requested input shape: a non-negative integer, or the name of a dim given a range
    in `dim_ranges` (checked by the compiler, `compiler.frontend.dim_range`)."""

    def to_internal_value(self, data):  # type: ignore[no-untyped-def]
        if isinstance(data, int) and not isinstance(data, bool) and data >= 0:
            return data
        if isinstance(data, str) and data.isidentifier():
            return data
        raise serializers.ValidationError("a dim is a non-negative integer or the name of a dim in dim_ranges")

    def to_representation(self, value):  # type: ignore[no-untyped-def]
        return value


@extend_schema_field({"type": "number", "minimum": 0, "exclusiveMinimum": True, "nullable": True})
class TuneBudgetField(serializers.Field):
    """`tune_budget_s`: seconds of auto-tuning before compiling (issue 16); absent or null: none.
    Checked by `validation.tune_budget_problem` (a positive number, at most PRISM_TUNE_MAX_BUDGET_S)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, allow_null=True, **kwargs)

    def to_internal_value(self, data):  # type: ignore[no-untyped-def]
        problem = validation.tune_budget_problem(data)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return data

    def to_representation(self, value):  # type: ignore[no-untyped-def]
        return value


class _TextField(serializers.CharField):
    """A CharField that refuses numbers, booleans, null, lists and objects with `problem(value)`
    (DRF's CharField would turn 42 into "42" and report it as an unknown name)."""

    def problem(self, value: object) -> str | None:
        """None when `value` (a non-string, or the string with its whitespace trimmed) is good."""
        return None if isinstance(value, str) else f"must be text; got {validation.describe(value)}"

    def required_message(self) -> str | None:
        """The message for a missing field (None: DRF's "This field is required.")."""
        return None

    def validate_empty_values(self, data):
        if data is None and not self.allow_null:
            raise serializers.ValidationError(self.problem(None))
        if data is empty and self.required and self.required_message():
            raise serializers.ValidationError(self.required_message())
        return super().validate_empty_values(data)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError(self.problem(data))
        value = super().to_internal_value(data)
        problem = self.problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class PipelineField(_TextField):
    """Pipeline text or a preset name; `""` is the empty pipeline (O0). See `validation`."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("help_text", "a preset name (O0..O3) or pass text such as "
                                       "'fold-constants,fuse-ops{max-group-size=16}'; '' runs no passes (as O0)")
        super().__init__(allow_blank=True, max_length=20000, trim_whitespace=True, **kwargs)

    def required_message(self) -> str:
        return f"required: {validation.pipeline_expected()}"

    def problem(self, value: object) -> str | None:
        return validation.pipeline_type_problem(value)


class ModelIdField(_TextField):
    """The model's id: the sha256 that POST /api/models returned (64 hex digits)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(help_text="the model's id: " + validation.MODEL_EXPECTED, **kwargs)
        self.error_messages["blank"] = validation.model_id_problem("")

    def required_message(self) -> str:
        return f"required: {validation.MODEL_EXPECTED}"

    def problem(self, value: object) -> str | None:
        return validation.model_id_problem(value)


class PipelineRequest(serializers.Serializer):
    pipeline = PipelineField()


class CompilationRequest(serializers.Serializer):
    model = ModelIdField()
    target = _TextField(default="host", max_length=64)
    pipeline = PipelineField(default="O2")
    input_shapes = serializers.DictField(
        child=serializers.ListField(child=DimField()),
        required=False,
        allow_null=True,
        help_text='{"input name": [1, 3, 224, 224]}; binds symbolic dims ("N" where dim_ranges ranges N)',
    )
    dim_ranges = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        required=False,
        allow_null=True,
        help_text='{"N": [1, 8]}: one artifact for every N in the range (a dim named in input_shapes)',
    )
    input_values = serializers.DictField(
        child=serializers.ListField(child=serializers.JSONField(), allow_empty=False),
        required=False,
        allow_null=True,
        help_text='{"input name": [1]}; binds inputs to values (constants of the compiled model: an If on '
                  "one folds); checked by the compiler, which names the input of a bad value",
    )
    options = serializers.DictField(
        required=False,
        help_text='{"verify": true, "benchmark": true, "calibration": "<sha256 from POST /api/calibrations>", '
                  '"threads": 2}; verify/benchmark booleans, threads 1..the worker\'s CPUs (default all; checked '
                  "by the submission service and the compiler)",
    )
    cache = serializers.BooleanField(default=True, help_text="false: always compile again")
    tune_budget_s = TuneBudgetField(
        help_text="seconds of auto-tuning first: schedules searched and measured on the workers serving "
                  "prism.tune.<target>, stored in the tuning database, then the model compiled with them")
    visibility = serializers.ChoiceField(
        ["private", "unlisted", "public"], required=False,
        help_text="private: the owner and its teams; unlisted (default): anyone with the link; public: listed")


class VisibilityRequest(serializers.Serializer):
    visibility = serializers.ChoiceField(["private", "unlisted", "public"])


class UserOut(serializers.Serializer):
    username = serializers.CharField()


class UploadRequest(serializers.Serializer):
    model = serializers.FileField(help_text="the .onnx file (multipart field `model`)")
    visibility = serializers.ChoiceField(["private", "unlisted", "public"], required=False,
                                         help_text="of this upload; unlisted by default")


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
    visibility = serializers.CharField(help_text="of the upload the requester sees")
    owner = UserOut(allow_null=True, help_text="who made that upload (null: anonymous)")
    created_at = serializers.DateTimeField()


class CompilationOut(serializers.Serializer):
    id = serializers.CharField(help_text="short public id, e.g. k3x9q2ab")
    url = serializers.CharField(help_text="the page: /c/<id>")
    api_url = serializers.CharField()
    events_url = serializers.CharField()
    ws_url = serializers.CharField()
    comments_url = serializers.CharField()
    comments_ws_url = serializers.CharField(help_text="WebSocket of the comment and review log")
    owner = UserOut(allow_null=True, help_text="who submitted it (null: anonymous)")
    visibility = serializers.ChoiceField(["private", "unlisted", "public"])
    can_edit = serializers.BooleanField(help_text="the requester owns it (may change its visibility)")
    model = ModelOut()
    target = serializers.CharField()
    pipeline = serializers.CharField(help_text="expanded pipeline text")
    requested_pipeline = serializers.CharField()
    input_shapes = serializers.DictField()
    input_values = serializers.DictField(help_text="{input: [values]} bound as constants ({} when none)")
    dim_ranges = serializers.DictField(help_text="{dim: [min, max]} of a ranged dim ({} when none)")
    options = serializers.DictField()
    compiler_version = serializers.CharField()
    status = serializers.ChoiceField(["queued", "running", "succeeded", "failed"])
    error = serializers.DictField(allow_null=True, help_text="the compile.failed payload")
    attempts = serializers.IntegerField()
    worker = serializers.CharField()
    event_count = serializers.IntegerField()
    verified = serializers.BooleanField(allow_null=True, help_text="true: outputs match ONNX Runtime; false: they "
                                        "differ (the compilation still succeeded); null: not compared (yet)")
    verification = serializers.CharField(allow_null=True, help_text="the verdict in words, e.g. 'not verified: "
                                         "ONNX Runtime failed (killed by SIGFPE)'; null before a verification")
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
    """Every error body of the API (4xx), one shape: `{"error": "<one line>"}`, plus at most one
    group of details. `detail`: the request did not validate or parse (DRF's own body: field ->
    messages, e.g. `{"model": ["must be ..."]}`, or `{"detail": "..."}` for a bad JSON body or
    method); `error` repeats its first message as `field: message`. `stage`, `pass`, `node`,
    `op`, `kernel`, `attribute`: the compiler refused the request (an unknown target, pass or
    option, an unbound dim, a model it cannot import); `error` is the compiler's message. Other
    errors (unknown id, upload too large, unknown /api/ path) have `error` only."""

    error = serializers.CharField(help_text="one line naming what is wrong")
    detail = serializers.JSONField(required=False, help_text="DRF's validation or parse error body")
    stage = serializers.CharField(required=False, help_text='where the compiler refused it: "request" or "import"')
    node = serializers.CharField(required=False, help_text="the node the compiler's message is about")
    op = serializers.CharField(required=False)
    kernel = serializers.CharField(required=False)
    attribute = serializers.CharField(required=False)
    field = serializers.CharField(required=False, help_text=(
        "the request field a refused compilation request concerns: pipeline, target, input_shapes, input_values, "
        "dim_ranges, calibration, threads, tune_budget_s or options (absent: the model itself)"))


ErrorOut._declared_fields["pass"] = serializers.CharField(  # a keyword, so not a class attribute
    required=False, help_text="the pass the compiler's message is about (e.g. an unknown pass)")
