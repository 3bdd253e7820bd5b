#!/usr/bin/env python3
"""Checks deploy/kubernetes/ the way CI can without a cluster.

Every manifest is validated strictly (unknown fields are errors) with kubernetes-validate
against a pinned Kubernetes version; every kustomization names every manifest beside it (a
file it forgets would silently never be applied) and nothing that is missing; the shape the
docs promise holds (two control replicas, probes on /readyz and /healthz, sandboxes' egress
to the proxy port alone). Where kubectl is installed, each kustomization is also rendered
with `kubectl kustomize` and the result validated; without it that step is said to be
skipped (Debian 12 packages no kubectl). Prints `N passed, N failed`; exits non-zero on any
failure.
"""

import os
import shutil
import subprocess
import sys

import kubernetes_validate
import yaml

KUBERNETES = "1.33.0"
HERE = os.path.dirname(os.path.abspath(__file__))
results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok     " if ok else "FAILED ") + what)


def validate(doc, where):
    try:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        check(True, f"{where}: {doc['kind']}/{doc['metadata']['name']} is valid")
    except kubernetes_validate.ValidationError as e:
        check(False, f"{where}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {e.message} at {list(e.path)}")


def kustomizations():
    for root, _, files in sorted(os.walk(HERE)):
        if "kustomization.yaml" in files:
            yield root


def listed(kust):
    with open(os.path.join(kust, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    names = [r for r in k.get("resources", []) if not r.startswith("..")]
    names += [p["path"] for p in k.get("patches", []) if "path" in p]
    return set(names), {p["path"] for p in k.get("patches", []) if "path" in p}


def main():
    docs = {}
    for kust in kustomizations():
        rel = os.path.relpath(kust, HERE)
        names, patches = listed(kust)
        present = {f for f in os.listdir(kust) if f.endswith(".yaml") and f != "kustomization.yaml"}
        check(present <= names, f"{rel}: the kustomization lists every manifest (unlisted: {sorted(present - names)})")
        check(names <= present, f"{rel}: every file it lists exists (missing: {sorted(names - present)})")
        for name in sorted(present - patches):
            with open(os.path.join(kust, name)) as f:
                for doc in yaml.safe_load_all(f):
                    validate(doc, f"{rel}/{name}")
                    docs[(doc["kind"], doc["metadata"]["name"])] = doc

    control = docs[("Deployment", "egressgate-control")]["spec"]
    check(control["replicas"] >= 2, "the control Deployment runs two replicas or more")
    for kind, name in [("Deployment", "egressgate-control"), ("Deployment", "egressgate-proxy"),
                       ("DaemonSet", "egressgate-proxy")]:
        c = docs[(kind, name)]["spec"]["template"]["spec"]["containers"][0]
        check(c["readinessProbe"]["httpGet"]["path"] == "/readyz"
              and c["livenessProbe"]["httpGet"]["path"] == "/healthz",
              f"{kind}/{name}: readiness on /readyz, liveness on /healthz")
    policy = docs[("NetworkPolicy", "sandbox-egress-only-through-egressgate")]["spec"]
    ports = [p for rule in policy["egress"] for p in rule.get("ports", [])]
    check(policy["policyTypes"] == ["Egress"] and all(rule.get("to") for rule in policy["egress"])
          and ports == [{"protocol": "TCP", "port": 3128}],
          "sandboxes may reach the proxy's port and nothing else (no DNS)")
    check(("Job", "egressgate-migrate") in docs
          and docs[("Job", "egressgate-migrate")]["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"],
          "a Job runs `egressgate migrate`")

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("skipped: kubectl is not installed, so the kustomizations were not rendered")
    for kust in kustomizations() if kubectl else []:
        rel = os.path.relpath(kust, HERE)
        out = subprocess.run([kubectl, "kustomize", kust], capture_output=True, text=True)
        check(out.returncode == 0, f"{rel}: `kubectl kustomize` renders it {out.stderr.strip()}")
        rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
        for doc in rendered:
            validate(doc, f"{rel} (rendered)")
        kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered}
        if rel == os.path.join("overlays", "daemonset"):
            check(("Deployment", "egressgate-proxy") not in kinds and ("DaemonSet", "egressgate-proxy") in kinds,
                  f"{rel}: the DaemonSet replaces the proxy Deployment")

    print(f"manifests: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
