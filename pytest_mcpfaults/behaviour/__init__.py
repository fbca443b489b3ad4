"""What each fault kind does, one module per phase, chosen by ``functools.singledispatch`` on the fault's
class: a new kind's behaviour goes here (the ``answer`` and ``cancel`` phases' dispatchers are still in
``core/routing.py`` and ``core/cancellation.py``)."""
