"""The public Python surface: exports, docstrings, reprs, streaming and chat on real models."""

from __future__ import annotations

import inspect as pyinspect

import pytest

import quickdraft


def test_every_public_name_is_exported_and_documented():
    for name in quickdraft.__all__:
        obj = getattr(quickdraft, name)
        assert obj.__doc__ and obj.__doc__.strip(), f"quickdraft.{name} has no docstring"
        if pyinspect.isclass(obj) and obj.__module__.startswith("quickdraft.") and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not callable(member):
                    continue
                assert member.__doc__, f"quickdraft.{name}.{attr} has no docstring"


def test_errors_are_value_errors():
    for exc in (quickdraft.GGUFError, quickdraft.IncompatibleModelsError, quickdraft.UnsupportedError):
        assert issubclass(exc, ValueError)


@pytest.mark.real
def test_stream_pieces_concatenate_to_the_completion(model_path):
    path = model_path("smollm2-135m")
    with quickdraft.Engine(path, draft="ngram", threads=2) as engine:
        assert "ngram" in repr(engine)
        stream = engine.stream("The three primary colours are", max_tokens=32, temperature=0)
        pieces = list(stream)
        done = stream.completion
        assert "".join(p.text for p in pieces) == done.text
        assert [t for p in pieces for t in p.tokens] == done.tokens
        assert done.finish_reason in ("eos", "length")


@pytest.mark.real
def test_chat_on_the_qwen_template_answers(model_path):
    with quickdraft.Engine(model_path("qwen2.5-coder-0.5b"), draft="ngram", threads=2) as engine:
        reply = engine.chat([{"role": "system", "content": "Answer with one word."},
                             {"role": "user", "content": "What is the capital of France?"}],
                            max_tokens=8, temperature=0)
        assert "paris" in reply.text.lower()
        assert reply.finish_reason in ("eos", "length")


@pytest.mark.real
def test_mismatched_pair_raises(model_path):
    with pytest.raises(quickdraft.IncompatibleModelsError):
        quickdraft.Engine(model_path("qwen2.5-coder-0.5b"), draft=str(model_path("smollm2-135m")))


@pytest.mark.real
def test_model_repr_says_what_is_loaded(model_path):
    m = quickdraft.Model(model_path("smollm2-135m"), n_ctx=64)
    r = repr(m)
    assert "llama" in r and "smollm2" in r.lower()


def test_no_import_cycle_between_modules():
    """The package's modules import each other (at the top or inside functions) without a cycle."""
    import ast
    from pathlib import Path

    root = Path(quickdraft.__file__).parent
    names = {p.stem for p in root.glob("*.py")} | {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    graph = {}
    for p in root.glob("*.py"):
        if p.stem == "__init__":
            continue
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[p.stem] = {d for d in deps if d in names and d not in ("__init__", "_core")}

    def visit(m, path):
        assert m not in path, "import cycle: " + " -> ".join(path + [m])
        for d in graph.get(m, ()):
            visit(d, path + [m])

    for m in graph:
        visit(m, [])
