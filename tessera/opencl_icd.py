"""Makes a pip-installed OpenCL driver visible to the OpenCL ICD loader, so that the `opencl` backend finds it.

Intel's OpenCL CPU runtime from PyPI (`pip install 'tessera[opencl]'`: intel-opencl-rt, intel-cmplr-lib-rt)
puts its driver, libintelocl.so, in `<prefix>/lib`; the `.icd` file it ships names a path on its build
machine, so the ICD loader (libOpenCL.so.1) never loads it (DESIGN §9). `register()` writes an `.icd` naming
the installed driver into a folder of its own, next to copies of the system's registrations
(/etc/OpenCL/vendors), and points `OCL_ICD_VENDORS` at that folder — before libtessera first asks OpenCL for
its platforms, which any context creation does (it lists the available backends). tessera.runtime calls it
when it is imported.

Nothing happens when `OCL_ICD_VENDORS` is already set (the user chose) or no such driver is installed.
"""

from __future__ import annotations

import glob
import hashlib
import os
import site
import sys
import tempfile

DRIVER = "libintelocl.so"
SYSTEM_VENDORS = "/etc/OpenCL/vendors"


def installed_driver() -> str | None:
    """The pip-installed Intel OpenCL CPU driver of this interpreter (its prefix, or the user's site), if any."""
    for prefix in (sys.prefix, site.getuserbase()):
        path = os.path.join(prefix, "lib", DRIVER)
        if os.path.exists(path):
            return path
    return None


def _write(path: str, text: str) -> None:
    """Writes atomically: several processes (test workers) may register at once."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def register() -> str | None:
    """Registers the pip-installed driver (see the module's doc) and returns the folder `OCL_ICD_VENDORS` now
    names; None when nothing was done."""
    if os.environ.get("OCL_ICD_VENDORS"):
        return None
    driver = installed_driver()
    if driver is None:
        return None
    key = hashlib.sha256(driver.encode()).hexdigest()[:12]
    folder = os.path.join(tempfile.gettempdir(), f"tessera-opencl-vendors-{os.getuid()}-{key}")
    os.makedirs(folder, exist_ok=True)
    wanted = {"tessera-pip-intel-cpu.icd": driver + "\n"}
    for icd in sorted(glob.glob(os.path.join(SYSTEM_VENDORS, "*.icd"))):
        try:
            with open(icd) as f:
                wanted[f"system-{os.path.basename(icd)}"] = f.read()
        except OSError:
            continue  # an unreadable registration is one the loader could not use either
    for name, text in wanted.items():
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        _write(path, text)
    os.environ["OCL_ICD_VENDORS"] = folder
    return folder
