"""KubeRay RayService: manifests from a serve config, validated offline (issue 10)."""
