// Package k8s holds no code: it exists so that the checks of the deployment
// files run with every `go test ./...`. Its tests guarantee that every
// manifest under k8s/ decodes strictly into its Kubernetes API type (a
// misspelt or misplaced field fails), that the kustomize base and the
// example overlay render, and that the rendered objects agree with each
// other and with the dispatcher: MAX_SENDERS covers the HPA's maxReplicas,
// the rolling-update surge and the other senders; the probes, the scrape
// and the network policy use HTTP_ADDR's port; every environment variable
// set is one the dispatcher reads; TARGET_RPS stays within CONTRACT_RPS;
// the HPA never scales on the marketing backlog; the pods run nonroot on a
// read-only root filesystem without capabilities; and the Dockerfile builds
// a static binary onto a nonroot distroless image.
//
// No other package may import this one: DESIGN.md gives k8s/ "how it runs
// on Kubernetes" and nothing else.
package k8s
