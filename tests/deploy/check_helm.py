"""tests/deploy/check_helm.py: checks the objects `helm template deploy/helm/kgate` rendered (YAML on stdin) as a cluster
would use them. Usage: check_helm.py default|bwrap-existing-secret. Prints every problem and exits 1 when there is one."""
import base64
import sys

import yaml

problems = []


def expect(cond, what):
    if not cond:
        problems.append(what)


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    mode = sys.argv[1]
    objs = [o for o in yaml.safe_load_all(sys.stdin) if o]
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    want = {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} | ({"Secret"} if mode == "default" else set())
    expect(set(by_kind) == want, "kinds %s, wanted %s" % (sorted(by_kind), sorted(want)))
    if "Deployment" not in by_kind:
        return report()
    dep = by_kind["Deployment"][0]
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    expect(matches(dep["spec"]["selector"]["matchLabels"], labels), "the Deployment's selector misses its pods")
    c = spec["containers"][0]
    port = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    expect(port.get("http") == 44772, "container port http %r, kgate listens on 44772" % port.get("http"))
    # the probes: kgate's routes that need no token (docs/operations.md)
    rp, lp = c.get("readinessProbe", {}).get("httpGet", {}), c.get("livenessProbe", {}).get("httpGet", {})
    expect(rp.get("path") == "/readyz" and rp.get("port") == "http", "readiness probe %r" % rp)
    expect(lp.get("path") == "/healthz" and lp.get("port") == "http", "liveness probe %r" % lp)
    expect("memory" in c.get("resources", {}).get("limits", {}), "no memory limit")
    env = {e["name"]: e for e in c.get("env", [])}
    ref = env.get("KGATE_ACCESS_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    expect(ref.get("key") == "token", "the token's key %r" % ref.get("key"))
    sc, csc = spec.get("securityContext", {}), c.get("securityContext", {})
    expect(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 10001, "not run as kgate's uid 10001")
    expect(csc.get("allowPrivilegeEscalation") is False and csc.get("capabilities", {}).get("drop") == ["ALL"],
           "the container keeps privileges: %r" % csc)
    svc = by_kind.get("Service", [{}])[0]
    expect(matches(svc.get("spec", {}).get("selector"), labels), "the Service selects no kgate pod")
    expect(svc.get("spec", {}).get("ports", [{}])[0].get("targetPort") == "http", "the Service's targetPort")
    expect(svc.get("spec", {}).get("sessionAffinity") == "ClientIP", "no session affinity: contexts live in one pod")
    pdb = by_kind.get("PodDisruptionBudget", [{}])[0].get("spec", {})
    expect(matches(pdb.get("selector", {}).get("matchLabels"), labels), "the PodDisruptionBudget covers no kgate pod")
    expect(pdb.get("maxUnavailable") == 1, "PodDisruptionBudget maxUnavailable %r" % pdb.get("maxUnavailable"))
    np = by_kind.get("NetworkPolicy", [{}])[0].get("spec", {})
    expect(matches(np.get("podSelector", {}).get("matchLabels"), labels), "the NetworkPolicy applies to no kgate pod")
    ingress = np.get("ingress", [])
    expect(len(ingress) == 1 and ingress[0].get("ports") == [{"port": "http", "protocol": "TCP"}],
           "the NetworkPolicy's ingress %r" % ingress)
    if mode == "default":
        secret = by_kind.get("Secret", [{}])[0]
        expect(ref.get("name") == secret.get("metadata", {}).get("name"), "the token comes from %r, not the chart's Secret %r"
               % (ref.get("name"), secret.get("metadata", {}).get("name")))
        token = base64.b64decode(secret.get("data", {}).get("token", "")).decode()
        expect(len(token) == 40 and token.isalnum(), "the generated token %r" % token)
        expect(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccomp %r" % sc.get("seccompProfile"))
        expect("hostUsers" not in spec and "args" not in c, "bwrap's settings without --sandbox bwrap")
    else:
        expect(ref.get("name") == "my-kgate-token", "the token comes from %r, not existingSecret" % ref.get("name"))
        expect(c.get("args", [])[:2] == ["--sandbox", "bwrap"], "args %r" % c.get("args"))
        expect(spec.get("hostUsers") is False, "bwrap without a pod user namespace")
        expect(sc.get("seccompProfile", {}).get("type") == "Unconfined", "RuntimeDefault seccomp refuses bwrap's unshare")
        expect(csc.get("procMount") == "Unmasked", "bwrap cannot mount /proc under a masked one")
    return report()


def report():
    for p in problems:
        print("check_helm: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
