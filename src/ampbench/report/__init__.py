"""Reports: terminal tables now; plots, HTML and advice build on the same rows."""
