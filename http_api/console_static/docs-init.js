// Swagger UI over this node's OpenAPI document. "Authorize" takes a bearer token (from
// POST /v1/auth/token, itself callable here); "Try it out" calls this node.
window.ui = SwaggerUIBundle({
  url: "/v1/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  persistAuthorization: false,
  tryItOutEnabled: false,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "StandaloneLayout",
});
