package jsonmap

import (
	"fmt"
	"strings"
)

// configMapJSON is a ConfigMap as a backup stores it (1.5 KB): the
// API server's metadata, managed fields listing its twenty keys.
func configMapJSON() []byte {
	var data, fields strings.Builder
	for i := range 20 {
		if i > 0 {
			data.WriteByte(',')
			fields.WriteByte(',')
		}
		fmt.Fprintf(&data, `"key-%02d":"value %02d of the bench"`, i, i)
		fmt.Fprintf(&fields, `"f:key-%02d":{}`, i)
	}
	return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-00042","namespace":"bench-03",` +
		`"uid":"0b7d3e1c-8f3a-4c55-9a55-2e6f1b0d9c1a","resourceVersion":"123456","creationTimestamp":"2026-12-07T20:00:00Z",` +
		`"labels":{"app":"bench","tier":"config"},"annotations":{"note":"made by the bench"},` +
		`"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"v1","time":"2026-12-07T20:00:00Z",` +
		`"fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},` + fields.String() + `},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}}}}]},` +
		`"data":{` + data.String() + `}}`)
}

// deploymentJSON is a Deployment as kubectl and the controllers leave it
// (about 6 KB), indented as the API server writes it for kubectl.
func deploymentJSON() []byte {
	return []byte(`{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {
    "annotations": {
      "deployment.kubernetes.io/revision": "3",
      "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\"},\"name\":\"web\",\"namespace\":\"shop\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"image\":\"nginx:1.27\",\"name\":\"web\",\"ports\":[{\"containerPort\":80}]}]}}}}\n"
    },
    "creationTimestamp": "2026-11-02T09:14:51Z",
    "generation": 3,
    "labels": {"app": "web", "app.kubernetes.io/part-of": "shop", "velero.io/backup-name": "nightly"},
    "managedFields": [
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
          "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}, "f:labels": {".": {}, "f:app": {}}},
          "f:spec": {
            "f:progressDeadlineSeconds": {}, "f:replicas": {}, "f:revisionHistoryLimit": {}, "f:selector": {},
            "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
            "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}, "f:resources": {}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}}, "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}
          }
        },
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "time": "2026-11-02T09:14:51Z"
      },
      {
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}, "f:status": {"f:availableReplicas": {}, "f:conditions": {".": {}, "k:{\"type\":\"Available\"}": {".": {}, "f:lastTransitionTime": {}, "f:lastUpdateTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Progressing\"}": {".": {}, "f:lastTransitionTime": {}, "f:lastUpdateTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}, "f:observedGeneration": {}, "f:readyReplicas": {}, "f:replicas": {}, "f:updatedReplicas": {}}},
        "manager": "kube-controller-manager",
        "operation": "Update",
        "subresource": "status",
        "time": "2026-11-30T22:03:10Z"
      }
    ],
    "name": "web",
    "namespace": "shop",
    "resourceVersion": "8812734",
    "uid": "5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
  },
  "spec": {
    "progressDeadlineSeconds": 600,
    "replicas": 3,
    "revisionHistoryLimit": 10,
    "selector": {"matchLabels": {"app": "web"}},
    "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
    "template": {
      "metadata": {"creationTimestamp": null, "labels": {"app": "web"}, "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9113"}},
      "spec": {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, "topologyKey": "kubernetes.io/hostname"}, "weight": 100}]}},
        "containers": [
          {
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}, {"name": "SHOP_DB_PASSWORD", "valueFrom": {"secretKeyRef": {"key": "password", "name": "shop-db"}}}],
            "image": "nginx:1.27",
            "imagePullPolicy": "IfNotPresent",
            "livenessProbe": {"failureThreshold": 3, "httpGet": {"path": "/healthz", "port": 80, "scheme": "HTTP"}, "initialDelaySeconds": 10, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
            "name": "web",
            "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
            "readinessProbe": {"failureThreshold": 3, "httpGet": {"path": "/ready", "port": 80, "scheme": "HTTP"}, "periodSeconds": 5, "successThreshold": 1, "timeoutSeconds": 1},
            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true, "runAsUser": 101},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"mountPath": "/etc/nginx/conf.d", "name": "conf", "readOnly": true}, {"mountPath": "/var/cache/nginx", "name": "cache"}]
          },
          {
            "args": ["-nginx.scrape-uri=http://localhost:80/stub_status"],
            "image": "nginx/nginx-prometheus-exporter:1.3.0",
            "imagePullPolicy": "IfNotPresent",
            "name": "exporter",
            "ports": [{"containerPort": 9113, "name": "metrics", "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "50m", "memory": "32Mi"}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"
          }
        ],
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {"fsGroup": 101},
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "web"}],
        "volumes": [{"configMap": {"defaultMode": 420, "name": "web-conf"}, "name": "conf"}, {"emptyDir": {"sizeLimit": "1Gi"}, "name": "cache"}]
      }
    }
  },
  "status": {
    "availableReplicas": 3,
    "conditions": [
      {"lastTransitionTime": "2026-11-02T09:15:03Z", "lastUpdateTime": "2026-11-02T09:15:03Z", "message": "Deployment has minimum availability.", "reason": "MinimumReplicasAvailable", "status": "True", "type": "Available"},
      {"lastTransitionTime": "2026-11-02T09:14:51Z", "lastUpdateTime": "2026-11-30T22:03:10Z", "message": "ReplicaSet \"web-7d4b9c8f6d\" has successfully progressed.", "reason": "NewReplicaSetAvailable", "status": "True", "type": "Progressing"}
    ],
    "observedGeneration": 3,
    "readyReplicas": 3,
    "replicas": 3,
    "updatedReplicas": 3
  }
}
`)
}

// customResourceJSON is a custom resource whose numbers a float64 would
// not keep: an integer past 2^53, and floats that must stay floats.
func customResourceJSON() []byte {
	return []byte(`{"apiVersion":"example.io/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","generation":1},` +
		`"spec":{"serial":9007199254740993,"ratio":0.1,"huge":1e300,"negativeZero":-0.0,"tiny":5e-324,"whole":2.0,` +
		`"big":18446744073709551615,"counts":[1,-2,3.5,4e2],"note":"\u00e9t\u00e9 \u003cb\u003e","flags":{"on":true,"off":false,"unset":null}}}`)
}
