package gateway

import (
	_ "embed"
	"net/http"
)

// openapiDoc is the OpenAPI 3.1 description of every route in apiRoutes;
// TestOpenAPIMatchesRoutes keeps the two in step.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(c *call) (int, any, error) {
	return http.StatusOK, rawBody{contentType: "application/json", data: openapiDoc}, nil
}
