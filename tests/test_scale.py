"""A library of 2,000 variants (250 kernels of 8 `when` ranges over 8 specializations, the
generated manifest of bench/scale.py): it builds with each specialization's kir generated,
compiled and embedded once, its C in files compiled in parallel into the same bytes whatever
the job count, and its dispatch names the right variant among them for sampled calls."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import scale  # noqa: E402

import aotk  # noqa: E402
from aotk.buildsys.cgen import C_FILE_VARIANTS  # noqa: E402
from aotk.jit import JITFunction  # noqa: E402


def test_two_thousand_variants_build_once_per_specialization_and_dispatch_right(
        tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    manifest = scale.write_project(tmp_path / "shared", scale.shared_manifest(2000))
    generated = []
    kir = JITFunction.kir
    monkeypatch.setattr(JITFunction, "kir",
                        lambda self, *a, **k: generated.append(1) or kir(self, *a, **k))
    result = aotk.build(manifest, jobs=2)
    assert len(result.variants) == 2000 and result.compiled == len(scale.BLOCKS)
    assert len(generated) == len(scale.BLOCKS)   # one kir per specialization, not per variant
    work = result.library.parent / ".aotk" / "shared"
    kernel_files = sorted(work.glob("shared_kernels_*.c"))
    # 250 kernels of 8 variants, C_FILE_VARIANTS to a file: the library's file and the rest
    assert len(kernel_files) + 1 == -(-2000 // C_FILE_VARIANTS)
    # The same bytes from one C compiler at a time (the fatbins come from the cache).
    again = aotk.build(manifest, out_dir=tmp_path / "one-job", jobs=1)
    assert again.compiled == 0
    assert again.library.read_bytes() == result.library.read_bytes()
    fatbins = list((result.library.parent / ".aotk" / "shared").glob("*.fatbin"))
    assert len(fatbins) == len(scale.BLOCKS)
    assert scale.check_dispatch(str(result.library), kernels=250, samples=300) == 300
    library = aotk.load(result.library)
    assert library.add249.select(0, 0, 0, 7 * scale.RANGE) == "add249[SCALE=2, BLOCK=8192]"
    assert library.add0.select(0, 0, 0, 8 * scale.RANGE) is None   # past every range
