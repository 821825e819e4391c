"""pmewald.pme.options: every argument of PME(...) checked once into one frozen value; the one
parser of "'auto' or a length" (skin, slab_gap)."""
import dataclasses
import math

import numpy as np
import pytest

from pmewald._checks.validate import auto_or_length
from pmewald.pme.options import AUTO_SKIN_FRACTION, DEFAULT_POLL, Options

ARGS = dict(box=np.eye(3) * 20.0, cutoff=8.0, tolerance=1e-4, alpha=None, mesh=None, order=None,
            differentiation="auto", comm_mode="nonblocking", coulomb_constant=1.0, real_space=True,
            error_model="correlated", overlap=None, overlap_poll=None, skin="auto", slab=False,
            slab_gap="auto", precision="double")


def test_parse_gives_one_frozen_value():
    o = Options.parse(**ARGS)
    assert o.skin == AUTO_SKIN_FRACTION * 8.0 and o.skin_auto and o.poll == DEFAULT_POLL and o.slab is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.cutoff = 9.0
    assert Options.parse(**ARGS).agreement_key() == o.agreement_key()
    assert Options.parse(**{**ARGS, "skin": 1.5}).agreement_key() != o.agreement_key()
    s = Options.parse(**{**ARGS, "slab": True, "slab_gap": 10.0})
    assert s.slab.gap == 10.0 and s.box[2, 2] == 30.0 and not s.slab.gap_auto


@pytest.mark.parametrize("value", [True, False, "x", "Auto", math.nan, math.inf, -1.0, None, [1.0]])
def test_auto_or_length_names_the_argument(value):
    with pytest.raises(ValueError, match=r"skin must be 'auto' or a non-negative finite length"):
        auto_or_length(value, "skin")


def test_auto_or_length_accepts():
    assert auto_or_length("auto", "x") is None
    assert auto_or_length(0, "x") == 0.0 and auto_or_length(np.float32(2.5), "x") == 2.5


@pytest.mark.parametrize("name, value, match", [("skin", -1.0, "skin must be"), ("slab_gap", "big", "slab_gap must be"),
                                                ("cutoff", 0.0, "cutoff must be"), ("comm_mode", "fast", "comm_mode"),
                                                ("overlap_poll", (0, 1.0), "overlap_poll")])
def test_parse_names_the_bad_argument(name, value, match):
    args = {**ARGS, name: value}
    if name == "slab_gap":
        args["slab"] = True
    with pytest.raises(ValueError, match=match):
        Options.parse(**args)


def test_compute_without_estimate():
    """compute(estimate=False): the same energy, forces and virial bit for bit, one set or
    several; no estimate (NaN, in parameters too), and the next call with it estimates again."""
    from mpi4py import MPI

    from pmewald import PME, systems

    w = systems.water_box(64)
    pme = PME(w.box, 5.0, tolerance=1e-5, comm=MPI.COMM_SELF, skin=0.0)  # every call the same pair search
    with_estimate = pme.compute(w.positions, w.charges, exclusions=w.exclusions)
    without = pme.compute(w.positions, w.charges, exclusions=w.exclusions, estimate=False)
    assert without.energy == with_estimate.energy
    assert np.array_equal(without.forces, with_estimate.forces) and np.array_equal(without.virial, with_estimate.virial)
    assert math.isnan(without.estimated_error) and math.isnan(pme.parameters["estimated_error"])
    sets = pme.compute(w.positions, np.stack([w.charges, 0.5 * w.charges], axis=1), exclusions=w.exclusions,
                       estimate=False)
    assert sets.energy[0] == pytest.approx(with_estimate.energy, rel=1e-12) and np.all(np.isnan(sets.estimated_error))
    assert pme.compute(w.positions, w.charges, exclusions=w.exclusions).estimated_error == with_estimate.estimated_error
