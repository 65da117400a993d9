// Package k8s holds no code: it is the nested module (k8s/go.mod) of the
// checks of the deployment and monitoring files, so that their heavy
// dependencies (kustomize, the Kubernetes API types, Prometheus's rule
// parser, buildkit's Dockerfile parser) stay out of the service's module.
// `cd k8s && go test ./...` runs them (.ci/run does). Its tests guarantee that every
// manifest under k8s/ decodes strictly into its Kubernetes API type (a
// misspelt or misplaced field fails), that the kustomize base, the
// example overlay and the receipts overlay render, and that the rendered
// objects agree with each
// other and with the dispatcher: MAX_SENDERS covers the HPA's maxReplicas,
// the rolling-update surge and the other senders; the probes, the scrape
// and the network policy use HTTP_ADDR's port, which only Prometheus may
// reach; with receipts on, RECEIPTS_ADDR has a port of its own that only
// the Ingress controller may reach, behind a Service and an Ingress serving
// RECEIPTS_PUBLIC_URL's host over TLS; every environment variable
// set is one the dispatcher reads; TARGET_RPS stays within CONTRACT_RPS;
// the HPA never scales on the marketing backlog; the pods run nonroot on a
// read-only root filesystem without capabilities; and the Dockerfile builds
// a static binary, without the demo, onto a nonroot distroless image; and
// that every alert rule names metrics the service exports and carries a
// runbook_url into docs/runbook.md; and that the product's internal/ holds
// only what the binary links and the helpers its tests import (the tools
// are a module of their own, tools/).
//
// No other package may import this one: docs/design.md gives k8s/ "how it
// runs on Kubernetes" and nothing else.
package k8s
