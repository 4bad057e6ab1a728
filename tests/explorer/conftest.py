import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # prism_stack


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Django's PBKDF2 takes about a second per password on a loaded machine: tests hash with MD5
    (the production hasher is tested by test_explorer_accounts)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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
