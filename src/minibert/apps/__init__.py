"""Applications on top of the library: the ``minibert`` command (cli.py), resumable file
outputs, the HTTP server (serve/; the ``serve`` extra), the Ray Data adapter
(ray.py; the ``ray`` extra), ``minibert convert`` and ``minibert verify``. Nothing below imports
these."""
