"""cairn-install: register the Cairn vSphere plugin, upload the SVM OVA, deploy from a plan."""
