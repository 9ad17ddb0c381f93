"""A library of 2,000 variants (250 kernels of 8 `when` ranges over 8 specializations, the
generated manifest of bench/scale.py): it builds with each specialization compiled and
embedded once, and its dispatch names the right variant among them for sampled calls."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import scale  # noqa: E402

import aotk  # noqa: E402


def test_two_thousand_variants_build_once_per_specialization_and_dispatch_right(
        tmp_path, monkeypatch):
    monkeypatch.setenv("AOTK_CACHE_DIR", str(tmp_path / "cache"))
    manifest = scale.write_project(tmp_path / "shared", scale.shared_manifest(2000))
    result = aotk.build(manifest, jobs=2)
    assert len(result.variants) == 2000 and result.compiled == len(scale.BLOCKS)
    fatbins = list((result.library.parent / ".aotk" / "shared").glob("*.fatbin"))
    assert len(fatbins) == len(scale.BLOCKS)
    assert scale.check_dispatch(str(result.library), kernels=250, samples=300) == 300
    library = aotk.load(result.library)
    assert library.add249.select(0, 0, 0, 7 * scale.RANGE) == "add249[SCALE=2, BLOCK=8192]"
    assert library.add0.select(0, 0, 0, 8 * scale.RANGE) is None   # past every range
