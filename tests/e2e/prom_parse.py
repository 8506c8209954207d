"""tests/e2e/prom_parse.py: reads a Prometheus text exposition on stdin with prometheus_client's own parser (as Prometheus
would take it) and prints its samples as JSON: {"families": {name: type}, "samples": [[name, {labels}, value], ...]}.
A text the parser refuses exits 1 with its error on stderr."""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    out = {"families": {}, "samples": []}
    try:
        for family in text_string_to_metric_families(text):
            out["families"][family.name] = family.type
            for s in family.samples:
                value = s.value
                if math.isinf(value) or math.isnan(value):
                    value = str(value)
                out["samples"].append([s.name, s.labels, value])
    except Exception as e:  # the parser's own error: the exposition is malformed
        print("prometheus_client refused the exposition: %r" % (e,), file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
