"""The HTTP door: the FastAPI app of `lodex serve` and its routers over the application object, its errors, auth and
metrics; and the clients of that API — `lodex.Client` and the CLI's forward to a running server — over one
standard-library JSON client. Importing this package imports nothing (the CLI's forward must stay light)."""
