"""lancedb imported without its REST client's eager API modules, and everything of it still there when asked for."""

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from pathlib import Path
from lodex.store.lance_store import LanceStore
store = LanceStore(Path(sys.argv[1]), 8)
print("api modules at open:", sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api.")))
import lance_namespace_urllib3_client as client
try:
    client.NoSuchName
except AttributeError:
    print("missing name: AttributeError")
from lance_namespace_urllib3_client import ApiClient, TagApi
print("asked for:", ApiClient.__name__, TagApi.__name__, client.Configuration.__name__)
from lance_namespace import LanceNamespace
print("namespace:", LanceNamespace.__name__)
"""


def test_opening_a_store_skips_the_rest_client_api_and_asking_for_it_still_works(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "data")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "api modules at open: []", lines[0]  # ~0.4 s of pydantic validate_call methods not built
    assert lines[1:] == ["missing name: AttributeError", "asked for: ApiClient TagApi Configuration", "namespace: LanceNamespace"]
