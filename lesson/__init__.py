"""The lesson as a page: native, Fabric and the Trainer side by side, one row per `# DDP:` mark.

    python -m lesson                      # writes docs/lesson.html (--output PATH elsewhere)

Built from the runner files themselves (`lesson.source`), rendered as one self-contained HTML
page (`lesson.page`); `tests/test_lesson.py` keeps the committed page current.
"""
