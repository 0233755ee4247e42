"""`GET /docs`: Swagger UI over the service's OpenAPI document, its scripts and styles served
by the service itself from an installed package (fastapi-offline's copy of swagger-ui-dist),
so the page works where no CDN can be reached and loads nothing from elsewhere."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

ASSETS_PATH = "/docs/assets"
ASSETS = Path(str(files("fastapi_offline") / "static"))
router = APIRouter()


@router.get("/docs", include_in_schema=False)
async def docs() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Sluicegate API",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
    )
