#!/usr/bin/env bash
echo "1..1"; echo "not ok 1 - placeholder"; exit 1
