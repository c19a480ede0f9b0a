"""The Jupyter server extension: ConchApp (`app`, which makes the services and installs the routes
and the door), the REST API's thin handlers (`handlers`, `outside_handlers`, `pairing_handlers`
over `base`), the request bodies (`bodies`) and the one typed accessor (`services`).

May import: every server-side package; nothing imports it but the package's face.
"""
