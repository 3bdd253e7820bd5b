# GET the URL in argv[1] with Python's urllib, every proxy setting ignored; print the body.
import sys
import urllib.request

opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    sys.stdout.write(opener.open(sys.argv[1], timeout=20).read().decode())
except Exception as e:  # noqa: BLE001 - the test reads the exit code and this line
    sys.stderr.write(f"python: {e!r}\n")
    sys.exit(3)
