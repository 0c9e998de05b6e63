"""The signature rules and their data lists, one class per rule, a comment per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetepi.agents.core.exceptions import BadRuleLine
from fleetepi.agents.core.rules import (
    DEFAULT_RULES_DIR,
    INTERPRETER_FILE,
    SKIP_FILE,
    SigFrame,
    SignatureInput,
    generate,
    load_list,
    load_rules,
    python_file_key,
)

RULES = load_rules()


def native(module: str, function: str | None = None, offset: int = 0x10) -> SigFrame:
    return SigFrame(module=module, function=function, offset=offset)


def py(file: str, function: str) -> SigFrame:
    return SigFrame(module=file, function=function, language="python")


class TestShippedLists:
    @pytest.mark.parametrize("name", [SKIP_FILE, INTERPRETER_FILE])
    def test_every_shipped_list_loads(self, name: str) -> None:
        lst = load_list(DEFAULT_RULES_DIR / name)
        assert lst.patterns, f"{name} is empty"

    def test_readme_names_every_list(self) -> None:
        readme = (DEFAULT_RULES_DIR / "README.md").read_text()
        for name in (SKIP_FILE, INTERPRETER_FILE):
            assert name in readme


class TestLoader:
    def test_bad_line_reports_file_and_line(self, tmp_path: Path) -> None:
        (tmp_path / SKIP_FILE).write_text("# comment\nabort\n\nfoo(bar\n")
        (tmp_path / INTERPRETER_FILE).write_text("")
        with pytest.raises(BadRuleLine) as info:
            load_rules(tmp_path)
        assert info.value.lineno == 4
        assert f"{SKIP_FILE}:4" in str(info.value)

    def test_missing_file_is_a_config_error(self, tmp_path: Path) -> None:
        with pytest.raises(BadRuleLine):
            load_rules(tmp_path)

    def test_custom_directory_changes_the_signature(self, tmp_path: Path) -> None:
        (tmp_path / SKIP_FILE).write_text("my_panic_handler\n")
        (tmp_path / INTERPRETER_FILE).write_text("")
        rules = load_rules(tmp_path)
        frames = [native("app", "my_panic_handler"), native("app", "do_work"), native("app", "main")]
        assert generate(SignatureInput(frames, []), rules).signature == "app!do_work | app!main"


class TestSkipCrashMachinery:
    @pytest.mark.parametrize(
        ("frames", "expected"),
        [
            # abort(): pthread_kill/raise/abort are how, not where
            ([native("libc.so.6", "__pthread_kill_implementation"), native("libc.so.6", "raise"),
              native("libc.so.6", "abort"), native("app", "check"), native("app", "main")], "app!check | app!main"),
            # libc without .symtab: its static helper is unnamed, but leads an abort stack
            ([native("libc.so.6", None, 0x8aeec), native("libc.so.6", "raise"), native("libc.so.6", "abort"),
              native("app", "check")], "app!check"),
            # an unnamed libc frame *after* user frames is kept (it is where the program was)
            ([native("app", "check"), native("libc.so.6", None, 0x1234)], "app!check | libc.so.6!0x1234"),
            # signal trampoline in the vDSO
            ([native("[vdso]", None, 0x5), native("app", "handler")], "app!handler"),
            # nothing but machinery: keep it rather than say nothing
            ([native("libc.so.6", "abort")], "libc.so.6!abort"),
            # module!function form of a line
            ([native("libc.so.6", "__assert_fail"), native("app", "f")], "app!f"),
        ],
    )
    def test_table(self, frames: list[SigFrame], expected: str) -> None:
        assert generate(SignatureInput(frames, []), RULES).signature == expected


class TestDropInterpreterFrames:
    def test_python_frames_lead_and_interpreter_frames_go(self) -> None:
        natives = [native("libc.so.6", "__strlen_avx2"), native("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"),
                   native("_ctypes.cpython-311-x86_64-linux-gnu.so", "string_at"), native("python3.11", None, 0x99)]
        result = generate(SignatureInput(natives, [py("train.py", "step"), py("train.py", "main")]), RULES)
        assert result.signature == (
            "python:train.py!step | python:train.py!main | libc.so.6!__strlen_avx2 | "
            "_ctypes.cpython-311-x86_64-linux-gnu.so!string_at"
        )
        assert any("DropInterpreterFrames" in n for n in result.notes)

    def test_without_python_frames_interpreter_frames_stay(self) -> None:
        natives = [native("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")]
        assert generate(SignatureInput(natives, []), RULES).signature == "libpython3.11.so.1.0!_PyEval_EvalFrameDefault"


class TestTakeTopFramesAndFallback:
    def test_long_names_are_cut_to_the_contract_bound(self) -> None:
        frames = [native("app", "f" * 5000 + str(i)) for i in range(3)]
        pys = [py("train.py", "g" * 5000) for _ in range(3)]
        assert len(generate(SignatureInput(frames, pys), RULES).signature) == 1024

    def test_only_n_native_frames(self) -> None:
        frames = [native("app", f"f{i}") for i in range(6)]
        assert generate(SignatureInput(frames, []), RULES).signature == "app!f0 | app!f1 | app!f2"

    def test_null_and_unmapped_frames_render_without_addresses(self) -> None:
        frames = [SigFrame(module="[null]", offset=0, unmapped=True), SigFrame(module="[unmapped]", unmapped=True),
                  native("app", "caller")]
        assert generate(SignatureInput(frames, []), RULES).signature == "NULL | [unmapped] | app!caller"

    @pytest.mark.parametrize(("partial", "expected"), [("cut", "unknown!truncated-core"), (None, "unknown!no-frames")])
    def test_no_frames(self, partial: str | None, expected: str) -> None:
        result = generate(SignatureInput([], [], partial_reason=partial), RULES)
        assert result.signature == expected
        assert result.notes

    def test_a_failing_rule_is_a_note_not_an_exception(self) -> None:
        class Broken:
            name = "Broken"

            def predicate(self, ctx, result, rules):  # type: ignore[no-untyped-def]
                raise RuntimeError("boom")

            def action(self, ctx, result, rules):  # type: ignore[no-untyped-def]
                pass

        from fleetepi.agents.core.rules import DEFAULT_RULES

        result = generate(SignatureInput([native("app", "f")], []), RULES, (Broken(), *DEFAULT_RULES))
        assert result.signature == "app!f"
        assert any("Broken failed" in n for n in result.notes)


class TestPythonFileKey:
    @pytest.mark.parametrize(
        ("path", "key"),
        [
            # stdlib: relative to lib/pythonX.Y
            ("/root/.pyenv/versions/3.11.7/lib/python3.11/ctypes/__init__.py", "ctypes/__init__.py"),
            # site-packages: the package path, not the venv
            ("/home/a/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "torch/nn/modules/module.py"),
            # user script: basename, no home directory
            ("/home/alice/jobs/train.py", "train.py"),
            # Debian's dist-packages
            ("/usr/lib/python3/dist-packages/numpy/core/numeric.py", "numpy/core/numeric.py"),
        ],
    )
    def test_table(self, path: str, key: str) -> None:
        assert python_file_key(path) == key


class TestProperties:
    """Whatever frames arrive, the pipeline answers, deterministically, within the contract's bounds."""

    from hypothesis import given, settings
    from hypothesis import strategies as st

    _frame = st.builds(
        SigFrame,
        module=st.sampled_from(["libc.so.6", "app", "[vdso]", "libcuda.so.1", "train.py"]),
        function=st.one_of(st.none(), st.sampled_from(["abort", "raise", "main", "step", "_PyEval_EvalFrameDefault"]),
                           st.text(max_size=300)),
        offset=st.integers(min_value=0, max_value=(1 << 40)),
        language=st.sampled_from(["native", "python"]),
        unmapped=st.booleans(),
    )

    @given(native=st.lists(_frame, max_size=40), python=st.lists(_frame, max_size=10), partial=st.booleans())
    @settings(max_examples=200, deadline=None)
    def test_never_raises_and_is_deterministic(self, native, python, partial):  # type: ignore[no-untyped-def]
        ctx = SignatureInput(native, python, partial_reason="cut" if partial else None)
        first = generate(ctx, RULES)
        assert first.signature and len(first.signature) <= 1024
        assert generate(ctx, RULES).signature == first.signature
        # a rule that raised says "<rule> failed: <exception>" (a frame may well be named "failed")
        from fleetepi.agents.core.rules import DEFAULT_RULES

        assert not [n for n in first.notes if any(n.startswith(f"{r.name} failed: ") for r in DEFAULT_RULES)]
