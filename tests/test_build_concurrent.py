"""Two builds of one manifest into one folder at once (make -j, two test workers on the
default manifest) both succeed and leave a complete library: each compiles its generated C
in a folder of its own."""
import ctypes

import aotk
from aotk.buildsys import builder
from tests.projects import ADD_KERNEL, add_manifest


def test_a_build_started_while_another_compiles_leaves_both_whole(tmp_path, monkeypatch):
    """The second build runs to its end while the first is between two of its C compiles
    (the first build's own tools are the trigger, so the overlap is certain): before, the
    second build emptied .aotk/small/ under the first, whose next compile failed ("can't
    create aotk_runtime.o: No such file or directory")."""
    (tmp_path / "add.py").write_text(ADD_KERNEL)
    (tmp_path / "aotk.toml").write_text(add_manifest(blocks=(256, 1024)))
    run = builder._run
    started = []

    def run_and_build_once_more(command, cwd, verbose):
        if not started:
            started.append(cwd)
            inner = aotk.build(tmp_path / "aotk.toml")
            assert inner.library.is_file()
        return run(command, cwd, verbose)

    monkeypatch.setattr(builder, "_run", run_and_build_once_more)
    result = aotk.build(tmp_path / "aotk.toml")
    assert started, "the first build compiled no C"
    assert result.library.is_file() and result.header.is_file()
    library = ctypes.CDLL(str(result.library))
    library.small_add_variant_name.restype = ctypes.c_char_p
    assert library.small_add_variant_name(0)
    work = tmp_path / "build" / ".aotk"
    left = sorted(p.name for p in work.iterdir() if p.is_dir())
    assert left == ["small"], left   # no build's private folder stays behind
    assert (work / "small" / "fingerprint").is_file()
