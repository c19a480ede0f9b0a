"""Tests in a real browser (Debian chromium through Playwright): the built view on a static page,
real JupyterLab and Notebook 7."""
