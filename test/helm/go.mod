module github.com/lifeboat-io/lifeboat/test/helm

go 1.26.0

require (
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	helm.sh/helm/v3 v3.22.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
