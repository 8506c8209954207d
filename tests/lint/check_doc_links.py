#!/usr/bin/python3
"""tests/lint/check_doc_links.py: the documentation's links and the source's citations of docs/API.md lead somewhere.

Every relative link of README.md, ARCHITECTURE.md and docs/*.md ([text](path) and [text](path#anchor), outside code)
names a file or folder that exists, and an anchor names a heading of that file (GitHub's ids); every citation of
docs/API.md in the source ("docs/API.md 5.2", "section 0", "Part 1", "Parts 1-3") names a section the file has.

Usage: check_doc_links.py SOURCE_DIR. Prints each broken one and fails if there is one."""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITE = re.compile(r"docs/API\.md`?\s*(?:\(?(Parts?|section)\s+)?(\d+(?:\.\d+)?)(?:\s*-\s*(\d+))?")
SOURCE_DIRS = ("gateway", "kernelmgr", "wire", "sys", "kernels", "tests", "bench", "deploy")
SOURCE_EXTS = (".c", ".h", ".py", ".sh", ".mjs", ".txt", ".cmake")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def outside_code(text):
    """The file's lines outside ``` fences, with inline code spans blanked."""
    fence = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield number, re.sub(r"`[^`]*`", "", line)


def anchors(path):
    ids, seen = set(), {}
    for _, line in outside_code(open(path, encoding="utf-8").read()):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            ids.add(base if n == 0 else "%s-%d" % (base, n))
            seen[base] = n + 1
    return ids


def check_links(root, broken):
    pages = ["README.md", "ARCHITECTURE.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    for page in pages:
        path = os.path.join(root, page)
        if not os.path.exists(path):
            continue
        for number, line in outside_code(open(path, encoding="utf-8").read()):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    broken.append("%s:%d: %s: no such file" % (page, number, target))
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    broken.append("%s:%d: %s: no such heading" % (page, number, target))


def check_citations(root, broken):
    api = open(os.path.join(root, "docs", "API.md"), encoding="utf-8").read()
    sections = set(re.findall(r"^#{2,3}\s+(\d+(?:\.\d+)?)\.?\s", api, re.M))
    for top in SOURCE_DIRS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(SOURCE_EXTS):
                    continue
                path = os.path.join(folder, name)
                try:
                    text = open(path, encoding="utf-8").read()
                except UnicodeDecodeError:
                    continue
                for number, line in enumerate(text.split("\n"), 1):
                    for _, first, last in CITE.findall(line):
                        for ref in [first] + ([str(n) for n in range(int(first) + 1, int(last) + 1)] if last else []):
                            if ref not in sections:
                                broken.append("%s:%d: docs/API.md %s: no such section" % (os.path.relpath(path, root), number, ref))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    broken = []
    check_links(root, broken)
    check_citations(root, broken)
    for b in broken:
        print(b, file=sys.stderr)
    if broken:
        sys.exit(1)
    print("every documentation link and docs/API.md citation leads somewhere")


if __name__ == "__main__":
    main()
