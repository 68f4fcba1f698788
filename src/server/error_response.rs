//! How an [`Error`] becomes an HTTP response: the status, body and `Retry-After` of its wire
//! form (`crate::server::error`). The only actix glue the error type has.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};

use crate::server::error::Error;

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        // Every status the mapping gives is a fixed, valid HTTP status (a test in
        // atc-protocol pins the codes' own).
        StatusCode::from_u16(self.wire().status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        // A refusal that passes says when to come back, in the header clients and proxies
        // already honour (RFC 9110 §10.2.3: delay-seconds).
        if let Some(secs) = self.wire().retry_after_secs {
            response.insert_header((header::RETRY_AFTER, secs));
        }
        response.json(self.body())
    }
}
