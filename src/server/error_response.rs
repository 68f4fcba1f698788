//! How a [`DaemonError`] becomes an HTTP response: the status its code has in
//! `atc_protocol`, and the wire body. The only actix glue the error type has.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

use crate::protocol::DaemonError;

impl ResponseError for DaemonError {
    fn status_code(&self) -> StatusCode {
        // Every code's status is a fixed, valid HTTP status (a test in atc-protocol pins them).
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(self.body())
    }
}
