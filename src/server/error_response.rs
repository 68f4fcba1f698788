//! How an [`Error`] becomes an HTTP response: the status and body of its wire form
//! (`crate::server::error`). The only actix glue the error type has.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::server::error::Error;

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        // Every status the mapping gives is a fixed, valid HTTP status (a test in
        // atc-protocol pins the codes' own).
        StatusCode::from_u16(self.wire().status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(self.body())
    }
}
