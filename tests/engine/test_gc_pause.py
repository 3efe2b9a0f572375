"""`paused_gc()` (engine/gc_pause.py): the collector is off inside, and its previous setting
comes back after, also when the block raises."""

import gc

import pytest

from prefixsim.engine.gc_pause import paused_gc


@pytest.fixture
def restore_gc():
    was_on = gc.isenabled()
    yield
    if was_on:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("on_before", [True, False])
def test_paused_then_previous_setting_restored(restore_gc, on_before):
    gc.enable() if on_before else gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled() == on_before


def test_restored_when_the_block_raises(restore_gc):
    gc.enable()
    with pytest.raises(RuntimeError, match="inside"), paused_gc():
        raise RuntimeError("inside")
    assert gc.isenabled()
