import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # prism_stack


@pytest.fixture
def make_compilation(db):
    """A compilation row with a placeholder model, for tests of the event log without a compiler."""
    from explorer.compilations.models import Compilation, UploadedModel

    def make(**fields) -> Compilation:
        model, _ = UploadedModel.objects.get_or_create(
            sha256="ab" * 32,
            defaults=dict(name="m.onnx", size=1, opset=17, file="models/ab/placeholder.onnx"),
        )
        defaults = dict(model=model, target="host", pipeline="fold-constants", compiler_version="t",
                        cache_key="k")
        return Compilation.objects.create(**{**defaults, **fields})

    return make
