//! Responses checked against the gateway's own `/openapi.json` (ADR 0305): each JSON body must
//! validate against the schema the document gives for its route, method and status. Request
//! bodies are checked against the route's request schema the same way (ADR 0373).

use serde_json::{Value, json};

use crate::common::{Http, Resp};

/// The document of one gateway.
#[derive(Debug)]
pub struct Contract {
    doc: Value,
}

impl Contract {
    pub async fn fetch(http: &Http) -> Contract {
        let resp = http.get("/openapi.json").await;
        assert_eq!(resp.code(), 200, "{}", resp.text);
        let doc = resp.json();
        assert_eq!(doc["openapi"], "3.1.0");
        Contract { doc }
    }

    /// Asserts that `resp` (to `method` on the route template `route`) is documented and that its
    /// JSON body validates against the documented schema. Returns the body.
    pub fn check(&self, method: &str, route: &str, resp: &Resp) -> Value {
        let op = &self.doc["paths"][route][method];
        assert!(op.is_object(), "{method} {route} is not in /openapi.json");
        let code = resp.code().to_string();
        let class = format!("{}XX", &code[..1]);
        let responses = &op["responses"];
        let documented = [code.as_str(), class.as_str(), "default"]
            .into_iter()
            .map(|k| &responses[k])
            .find(|r| r.is_object())
            .unwrap_or_else(|| panic!("{method} {route}: status {code} is not documented"));
        let schema = &documented["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {route} {code}: no JSON schema documented"
        );
        let body = resp.json();
        let errors = self.errors(schema, &body, &format!("{method} {route} {code}"));
        assert!(
            errors.is_empty(),
            "{method} {route} {code}: the body does not match /openapi.json: {errors:?}\n{body}"
        );
        body
    }

    /// What is wrong with `body` as the JSON request body of `method` on `route` according to
    /// the document: empty when it validates.
    pub fn request_errors(&self, method: &str, route: &str, body: &Value) -> Vec<String> {
        let op = &self.doc["paths"][route][method];
        let schema = &op["requestBody"]["content"]["application/json"]["schema"];
        assert!(
            schema.is_object(),
            "{method} {route}: no JSON request schema documented"
        );
        self.errors(schema, body, &format!("{method} {route} request"))
    }

    /// `value` against `schema`, with the document's components beside it so its
    /// `#/components/schemas/…` references resolve.
    fn errors(&self, schema: &Value, value: &Value, what: &str) -> Vec<String> {
        let mut root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.doc["components"].clone(),
        });
        if let (Some(root), Some(schema)) = (root.as_object_mut(), schema.as_object()) {
            for (k, v) in schema {
                root.insert(k.clone(), v.clone());
            }
        }
        let validator = jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("{what}: bad schema: {e}"));
        validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }
}
