"""The web console (issue 18): a small ASGI app served by hypercorn's trio worker in the
broker's own nursery. Off unless ``kafkad.http.listeners`` is set.

Layout: ``settings`` parses the configs (imported by ``proxy/config.py``, so it imports
nothing heavy); ``server`` binds and runs hypercorn (imported only when the console is on,
which is when hypercorn and jinja2 are first imported); ``app`` routes requests to the view
models in ``views/`` (plain functions over the broker's state, unit-tested without HTTP) and
renders them with the templates in ``templates/``.
"""
