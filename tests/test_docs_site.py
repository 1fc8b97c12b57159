"""The docs site builds strictly: `mkdocs build --strict` (mkdocs.yml at the
root) fails on a broken link, a missing anchor or a page left out of the nav,
and so does this test. Nothing is fetched: the default theme, no plugins."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from helpers import REPO


def test_site_builds_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "cli" / "index.html").is_file()


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_nav_once_and_the_build_is_strict():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True and config["theme"]["name"] == "mkdocs" and not config.get("plugins")
    assert config["validation"]["nav"]["omitted_files"] == "warn" and config["validation"]["links"]["anchors"] == "warn"
    pages = _nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    assert sorted(pages) == sorted(p.name for p in (REPO / "docs").glob("*.md"))


def test_readme_links_into_docs_resolve():
    """README.md is not part of the site, so the build does not see its links: check them here."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#[^)]*)?\)", readme)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        assert (REPO / link).exists(), link
