"""The bodies of /v1/collections, and what a collection name may be (every endpoint that
names one checks it against COLLECTION_NAME)."""

from __future__ import annotations

from pydantic import BaseModel, Field

COLLECTION_NAME = r"^[a-z][a-z0-9_]{0,63}$"


class CollectionCreate(BaseModel):
    name: str = Field(pattern=COLLECTION_NAME, examples=["docs"])
    description: str = Field("", max_length=1000)


class Collection(BaseModel):
    name: str
    dimension: int
    description: str = ""
    created_at: float = 0.0
    num_chunks: int | None = None
    num_documents: int | None = None


class CollectionList(BaseModel):
    collections: list[Collection]
