"""The providers' web console at `/console`, on top of the admin operations.

Off unless `[admin] token_hash` is set, like the admin API; signing in takes
the admin token. Pages are rendered on the server (Jinja2) with a little
JavaScript from `static/`, and every change goes through `sharing_server.admin.commands.Admin`.

    web.py         sessions, CSRF, forms, templates: the wrapper of every handler
    sessions.py    the signed session cookie, its CSRF token and idle timeout
    signin.py      sign in and out
    shares.py      shares and their tables; picker.py finds tables to add
    recipients.py  tokens and OAuth clients
    tables.py      the table page (table_view.py reads it through the server's readers)
    activity.py    recent requests from the store, with chart.py's hourly bars
    health.py      store, storage and catalogs, with latency
"""
