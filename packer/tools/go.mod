module github.com/cairn-storage/cairn/packer/tools

go 1.26.8

require github.com/vmware/govmomi v0.56.0

require (
	github.com/cairn-storage/cairn/appliance v0.0.0-00010101000000-000000000000
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/cairn-storage/cairn/appliance => ../../appliance
