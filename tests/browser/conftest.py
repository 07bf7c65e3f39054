"""A real headless Chromium (Debian's chromium + chromium-driver) driven by Selenium; nothing downloads a
browser. `./setup.sh --browser` installs both; where neither is installed the browser tests skip, saying why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).is_file()), None)
DRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").is_file() else None)


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e '.[test]')")
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("no Chromium here: `./setup.sh --browser` installs Debian's chromium and chromium-driver (apt-get)")
    service = pytest.importorskip("selenium.webdriver.chrome.service")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=service.Service(DRIVER), options=options)  # both paths given: no Selenium Manager
    yield driver
    driver.quit()
