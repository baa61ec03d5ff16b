"""Where in a model archive's own code a Python exception came from, as the
server reports it (server/lifecycle/archive_traceback.h, read from the same
traceback text): the frames whose file is one of the archive's modules
(torch.package names them "<torch_package_N>.pkg.mod.py"), innermost first,
as files inside the archive. Plain Python; no torch.
"""

import re

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>.*)$')
_PACKAGE_FILE = re.compile(r"^<torch_package_\d+>\.(?P<module>.+)\.py$")
_CARETS = re.compile(r"^[\^~ ]+$")


def _file_in_archive(name):
    """'<torch_package_0>.pkg.sub.mod.py' -> 'pkg/sub/mod.py'; None if not the archive's."""
    m = _PACKAGE_FILE.match(name)
    return m.group("module").replace(".", "/") + ".py" if m else None


def archive_frames(traceback_text):
    """[(file, line, function, source)] of the archive's frames, innermost first."""
    lines = traceback_text.splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if not m:
            continue
        file = _file_in_archive(m.group("file"))
        if file is None:
            continue
        source = ""
        if i + 1 < len(lines) and lines[i + 1].startswith("    "):
            following = lines[i + 1].strip()
            if not _FRAME.match(lines[i + 1]) and following and not _CARETS.match(following):
                source = following
        frames.append((file, int(m.group("line")), m.group("function"), source))
    return frames[::-1]  # a traceback lists the innermost last


def describe(traceback_text, max_chars=600):
    """' at helpers.py:12 in scale: raise ValueError(...) (called from
    model.py:30 in forward)', or '' when no frame is the archive's."""
    frames = archive_frames(traceback_text)
    if not frames:
        return ""

    def where(frame):
        return f"{frame[0]}:{frame[1]} in {frame[2]}"

    text = " at " + where(frames[0]) + (f": {frames[0][3]}" if frames[0][3] else "")
    callers = [where(f) for f in frames[1:3]]
    if callers:
        text += " (called from " + "; ".join(callers) + ")"
    if len(text) > max_chars:
        text = text[:max(max_chars - 3, 0)] + "..."
    return text
