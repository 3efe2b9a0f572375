"""Close the figures a test drew (plot functions return open matplotlib figures)."""

import matplotlib.pyplot as plt
import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
