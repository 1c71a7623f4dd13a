"""A pytest plugin (``-p compat_mirror``) for running TorchServe 0.12's tests offline: the files
its tests and their helpers fetch from pytorch.org in the pytest process itself (``requests.get``,
``urllib.request.urlretrieve`` in ts_scripts/marsgen.py) are answered from the stand-ins that
build_standins.py made, under ``$COMPAT_STANDINS``:

    https://download.pytorch.org/models/<file>           -> $COMPAT_STANDINS/models/<file>
    https://torchserve.pytorch.org/mar_files/<file>      -> $COMPAT_STANDINS/mar_files/<file>
    https://torchserve.s3.amazonaws.com/mar_files/<file> -> $COMPAT_STANDINS/mar_files/<file>

Any other address, and a file with no stand-in, goes to the network as usual (offline: it fails,
as it would have). Servers under test are not touched: a model registered from a URL is
downloaded by the server, which stays offline, for TorchServe and tserve alike.
"""

from __future__ import annotations

import email.message
import io
import os
import urllib.request
import urllib.response
from pathlib import Path
from typing import Any

MIRRORED = {
    "https://download.pytorch.org/models/": "models",
    "https://torchserve.pytorch.org/mar_files/": "mar_files",
    "https://torchserve.s3.amazonaws.com/mar_files/": "mar_files",
}


def standin(url: str) -> Path | None:
    """The local stand-in for ``url``, or None (then the request goes to the network)."""
    root = os.environ.get("COMPAT_STANDINS")
    if not root:
        return None
    for prefix, folder in MIRRORED.items():
        if url.startswith(prefix):
            name = url[len(prefix):].split("?", 1)[0]
            path = Path(root, folder, name)
            if "/" not in name and path.is_file():
                return path
    return None


class _Mirror(urllib.request.BaseHandler):
    handler_order = 100  # before HTTPSHandler (500)

    def https_open(self, req: urllib.request.Request) -> urllib.response.addinfourl | None:
        path = standin(req.full_url)
        if path is None:
            return None
        headers = email.message.Message()
        headers["Content-Length"] = str(path.stat().st_size)
        response = urllib.response.addinfourl(io.BytesIO(path.read_bytes()), headers, req.full_url, 200)
        response.msg = "OK"  # type: ignore[attr-defined]  # read by urllib's HTTPErrorProcessor
        return response


def _patch_requests() -> None:
    import requests
    from requests.adapters import HTTPAdapter
    from requests.structures import CaseInsensitiveDict

    send = HTTPAdapter.send

    def mirrored_send(self: HTTPAdapter, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        path = standin(request.url or "")
        if path is None or request.method != "GET":
            return send(self, request, *args, **kwargs)
        response = requests.Response()
        response.status_code = 200
        response._content = path.read_bytes()
        response._content_consumed = True
        response.headers = CaseInsensitiveDict({"Content-Length": str(len(response._content))})
        response.url = request.url or ""
        response.request = request
        response.raw = io.BytesIO(response._content)
        return response

    HTTPAdapter.send = mirrored_send  # type: ignore[method-assign]


urllib.request.install_opener(urllib.request.build_opener(_Mirror))
_patch_requests()
