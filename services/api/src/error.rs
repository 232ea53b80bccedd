//! API errors: every failure is a status and a JSON body `{"error": "…"}`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chime_core::model::SubmissionError;
use chime_core::store::StoreError;
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
}

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// The same error, its message prefixed with where it is (`tasks[3]: …`).
    pub fn at(self, place: &str) -> Self {
        Self {
            status: self.status,
            message: format!("{place}: {}", self.message),
        }
    }

    /// 404 Not Found.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, error = %self.message, "request failed");
        }
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::UnknownKind(_) => Self::bad_request(error.to_string()),
            StoreError::UnknownGroup(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string())
            }
            StoreError::TaskNotFound(_)
            | StoreError::NotFound(_)
            | StoreError::NotFoundInGroup { .. } => Self::not_found(error.to_string()),
            StoreError::Invalid(_) => Self::bad_request(error.to_string()),
            StoreError::Conflict(_) => Self::new(StatusCode::CONFLICT, error.to_string()),
            StoreError::Forbidden(_) => Self::new(StatusCode::FORBIDDEN, error.to_string()),
            StoreError::Database { .. } | StoreError::InvalidUrl(_) | StoreError::Migrate(_) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
            }
        }
    }
}

impl From<SubmissionError> for ApiError {
    fn from(error: SubmissionError) -> Self {
        let status = match error {
            SubmissionError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(status, error.to_string())
    }
}

/// A JSON request body whose rejections (bad JSON, wrong shape, too large, wrong content type)
/// are JSON errors like every other.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}
