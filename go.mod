module github.com/writhq/writ

go 1.26.0

require github.com/gowebpki/jcs v1.0.2

require go.yaml.in/yaml/v3 v3.0.6 // indirect
