module github.com/cairn-storage/cairn/tests/chaos/linearize

go 1.26

require github.com/anishathalye/porcupine v1.0.0
